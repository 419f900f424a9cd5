package krm

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"

	goyaml "go.yaml.in/yaml/v2"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/kustomize/kyaml/fn/framework"
	"sigs.k8s.io/kustomize/kyaml/kio"
	kyaml "sigs.k8s.io/kustomize/kyaml/yaml"
	"sigs.k8s.io/yaml"

	"github.com/sandbox-gitops/sandbox-gitops/internal/parallel"
)

// Run is the function's I/O: it reads a ResourceList from in, processes it and writes the result
// to out, streaming one item at a time. It returns the results as an error when one of them is an
// error (the function then exits non-zero), after writing the output.
//
// kyaml's framework.Execute would serialise the whole list as one YAML document; on tens of
// thousands of items that costs more than the render itself. Items the function passes through
// are written as the nodes it read; rendered ones are written from their objects directly.
func Run(in io.Reader, out io.Writer) error {
	data, err := io.ReadAll(in)
	if err != nil {
		return fmt.Errorf("reading the ResourceList: %w", err)
	}
	rw := &kio.ByteReader{Reader: bytes.NewReader(data), OmitReaderAnnotations: true}
	items, err := rw.Read()
	if err != nil {
		return fmt.Errorf("reading the ResourceList: %w", err)
	}
	rl := &framework.ResourceList{Items: items, FunctionConfig: rw.FunctionConfig}
	res, procErr := process(rl)
	source := sourceTexts(data, items)
	for i := range res {
		res[i].text = source[res[i].node]
	}
	if err := write(out, rl, res); err != nil {
		return err
	}
	if procErr != nil {
		return procErr
	}
	if rl.Results.ExitCode() != 0 {
		return rl.Results
	}
	return nil
}

// item is one output item: a node passed through (with its text as it was read, when known), or
// a rendered object.
type item struct {
	node *kyaml.RNode
	text []byte
	obj  *unstructured.Unstructured
}

// sourceTexts finds, for each item of a block-style ResourceList, its text exactly as it was in
// the input (without the "- " and the indentation of the items list), so that items passed
// through come out byte for byte and need no encoding. Items it cannot delimit safely (flow
// style, JSON, several on one line) are left out and get encoded.
func sourceTexts(data []byte, items []*kyaml.RNode) map[*kyaml.RNode][]byte {
	out := make(map[*kyaml.RNode][]byte, len(items))
	lines := bytes.SplitAfter(data, []byte("\n"))
	end := len(lines) // exclusive, 0-based: where the text of the current item stops
	// The items list is followed by functionConfig or results, or by the end of the input; find
	// the first top-level key after the last item.
	last := 0
	for _, n := range items {
		last = max(last, n.YNode().Line)
	}
	for i := last; i < len(lines); i++ {
		if l := lines[i]; len(l) > 0 && l[0] != ' ' && l[0] != '-' && l[0] != '#' && l[0] != '\n' {
			end = i
			break
		}
	}
	for k := len(items) - 1; k >= 0; k-- {
		y := items[k].YNode()
		start := y.Line - 1
		if y.Style&kyaml.FlowStyle != 0 || y.Line == 0 || y.Column < 3 || start >= end {
			end = start
			continue
		}
		indent := y.Column - 1 // the item's keys start here; "- " sits just before
		first := lines[start]
		if len(first) < indent || string(first[indent-2:indent]) != "- " {
			end = start
			continue
		}
		var b bytes.Buffer
		ok := true
		for i := start; i < end && ok; i++ {
			l := lines[i]
			switch {
			case i == start:
				b.Write(l[indent:])
			case len(bytes.TrimSpace(l)) == 0:
				b.WriteString("\n")
			case len(l) >= indent && len(bytes.TrimLeft(l[:indent], " ")) == 0:
				b.Write(l[indent:])
			default:
				ok = false // something outside the item's indentation: not ours to cut
			}
		}
		if ok {
			out[items[k]] = b.Bytes()
		}
		end = start
	}
	return out
}

func write(out io.Writer, rl *framework.ResourceList, items []item) error {
	texts, err := encodeAll(items)
	if err != nil {
		return err
	}
	w := bufio.NewWriterSize(out, 1<<20)
	w.WriteString("apiVersion: config.kubernetes.io/v1\nkind: ResourceList\nitems:\n")
	for _, text := range texts {
		writeIndented(w, "- ", text)
	}
	if rl.FunctionConfig != nil {
		s, err := rl.FunctionConfig.String()
		if err != nil {
			return err
		}
		w.WriteString("functionConfig:\n")
		writeIndented(w, "  ", []byte(s))
	}
	if len(rl.Results) > 0 {
		b, err := yaml.Marshal(rl.Results)
		if err != nil {
			return err
		}
		w.WriteString("results:\n")
		writeIndented(w, "", b)
	}
	return w.Flush()
}

// encodeAll serialises the items on every core; on large lists encoding costs as much as the
// render.
func encodeAll(items []item) ([][]byte, error) {
	texts := make([][]byte, len(items))
	errs := make([]error, len(items))
	parallel.Each(len(items), func(i int) {
		it := items[i]
		if it.text != nil {
			texts[i] = it.text
			return
		}
		if it.node != nil {
			var s string
			s, errs[i] = it.node.String()
			texts[i] = []byte(s)
			return
		}
		// Straight to YAML: sigs.k8s.io/yaml would go through JSON and parse it again. The
		// encoder quotes strings that would read back as numbers (hash labels such as 58130e46).
		texts[i], errs[i] = goyaml.Marshal(it.obj.Object)
	})
	return texts, errors.Join(errs...)
}

// writeIndented writes a YAML document as a block under a list or map key: the first line after
// first, the others indented by two spaces. Block scalars stay valid: their indentation is
// relative.
func writeIndented(w *bufio.Writer, first string, text []byte) {
	text = bytes.TrimRight(text, "\n")
	for i, line := range bytes.Split(text, []byte("\n")) {
		switch {
		case i == 0:
			w.WriteString(first)
		case len(line) > 0 && first != "":
			w.WriteString("  ")
		}
		w.Write(line)
		w.WriteByte('\n')
	}
}
