// Package quote writes values a user wrote into messages: one line each, whatever the value
// holds (a newline in a name split a finding line in two), and bounded (a 10 MB name gave 20 MB
// of standard error).
package quote

import (
	"fmt"
	"strconv"
	"unicode"
	"unicode/utf8"
)

// Max is how many characters of a value a message shows.
const Max = 200

// Value is s quoted as strconv.Quote quotes it (control characters escaped), cut to Max
// characters with its length given: "aaaa…" (10485760 characters).
func Value(s string) string {
	if n := utf8.RuneCountInString(s); n > Max {
		return fmt.Sprintf("%s (%d characters)", strconv.Quote(cut(s)+"…"), n)
	}
	return strconv.Quote(s)
}

// Name is a name as messages show it: as written when it is a plain name (printable characters,
// no space, quote or backslash, at most Max characters) or empty, else as Value quotes it.
func Name(s string) string {
	if len(s) > Max {
		return Value(s)
	}
	for _, r := range s {
		if !unicode.IsPrint(r) || r == ' ' || r == '"' || r == '\\' {
			return Value(s)
		}
	}
	return s
}

// Cut is s cut to Max characters, with its length given, unquoted: for text that is not a value
// of its own (a message that quoted a value already).
func Cut(s string) string {
	if n := utf8.RuneCountInString(s); n > Max {
		return fmt.Sprintf("%s… (%d characters)", cut(s), n)
	}
	return s
}

func cut(s string) string {
	i, n := 0, 0
	for i < len(s) && n < Max {
		_, size := utf8.DecodeRuneInString(s[i:])
		i += size
		n++
	}
	return s[:i]
}
