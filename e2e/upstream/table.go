package upstream

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Table is the report's rows as a Markdown table, its columns padded so that it reads as plain
// text too (package, test, result, seconds, note), then a line counting each result.
func Table(r Report) string {
	header := []string{"package", "test", "result", "seconds", "note"}
	cells := [][]string{header}
	for _, row := range r.Rows {
		secs := "-"
		if row.Seconds >= 0 {
			secs = strconv.FormatFloat(row.Seconds, 'f', 1, 64)
		}
		cells = append(cells, []string{row.Package, row.Test, string(row.Result), secs, escape(row.Note)})
	}
	width := make([]int, len(header))
	for _, c := range cells {
		for i, v := range c[:len(c)-1] { // the note, last, is not padded
			width[i] = max(width[i], utf8.RuneCountInString(v))
		}
	}
	var b strings.Builder
	line := func(c []string) {
		b.WriteString("|")
		for i, v := range c {
			pad := 0
			if i < len(c)-1 {
				pad = width[i] - utf8.RuneCountInString(v)
			}
			fmt.Fprintf(&b, " %s%s |", v, strings.Repeat(" ", pad))
		}
		b.WriteString("\n")
	}
	line(cells[0])
	sep := make([]string, len(header))
	for i := range sep {
		sep[i] = strings.Repeat("-", max(width[i], 3))
	}
	sep[len(sep)-1] = "---"
	line(sep)
	for _, c := range cells[1:] {
		line(c)
	}
	fmt.Fprintf(&b, "\n%d PASS, %d FAIL, %d SKIP\n", r.Count(Pass), r.Count(Fail), r.Count(Skip))
	return b.String()
}

// Details are the report's problems, then the end of each failed test's output up to its
// cleanup (at most maxLines lines of each), for the reader who wants more than the table's
// note.
func Details(r Report, maxLines int) string {
	var b strings.Builder
	if len(r.Problems) == 0 {
		b.WriteString("No problems.\n")
	} else {
		b.WriteString("Problems:\n")
		for _, p := range r.Problems {
			fmt.Fprintf(&b, "- %s\n", p)
		}
	}
	names := make([]string, 0, len(r.Failures))
	for n := range r.Failures {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		out := BeforeCleanup(r.Failures[n])
		fmt.Fprintf(&b, "\n## %s\n\n```\n", n)
		if len(out) > maxLines {
			fmt.Fprintf(&b, "[%d lines before]\n", len(out)-maxLines)
			out = out[len(out)-maxLines:]
		}
		for _, l := range out {
			b.WriteString(l + "\n")
		}
		b.WriteString("```\n")
	}
	return b.String()
}

// escape keeps a note on its row: a pipe would end the cell.
func escape(s string) string { return strings.ReplaceAll(s, "|", `\|`) }
