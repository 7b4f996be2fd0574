// Package vectors carries the project's CL.THROTTLE test vectors (redis-cell
// semantics and rounding) inside the repository, so that a fresh clone runs
// every test with nothing beside it. It has no dependencies and no state.
package vectors

import (
	_ "embed"
	"fmt"
	"strconv"
	"strings"
)

//go:embed testdata/cl_throttle.tsv
var throttleTSV string

// Throttle is one vector row: at server time TMs (milliseconds on a test
// clock), CL.THROTTLE Key Args... must reply Want. Rows run in order on one
// fresh server.
type Throttle struct {
	Line int
	TMs  int64
	Key  string
	Args []string // max_burst count period quantity
	Want [5]int64
	Text string // the row as written, for failure messages
}

// ThrottleRows parses the embedded vector file. An error names the line at
// fault.
func ThrottleRows() ([]Throttle, error) {
	var rows []Throttle
	for i, text := range strings.Split(throttleTSV, "\n") {
		line := i + 1
		text = strings.TrimRight(text, "\r")
		if text == "" || strings.HasPrefix(text, "#") {
			continue
		}
		cols := strings.Split(text, "\t")
		if len(cols) != 4 {
			return nil, fmt.Errorf("cl_throttle.tsv line %d: want 4 tab-separated columns, got %d: %q", line, len(cols), text)
		}
		tms, err := strconv.ParseInt(cols[0], 10, 64)
		if err != nil {
			return nil, fmt.Errorf("cl_throttle.tsv line %d: t_ms %q: %w", line, cols[0], err)
		}
		args := strings.Fields(cols[2])
		want := strings.Fields(cols[3])
		if len(args) != 4 || len(want) != 5 {
			return nil, fmt.Errorf("cl_throttle.tsv line %d: want 4 args and 5 results: %q", line, text)
		}
		r := Throttle{Line: line, TMs: tms, Key: cols[1], Args: args, Text: text}
		for k, w := range want {
			if r.Want[k], err = strconv.ParseInt(w, 10, 64); err != nil {
				return nil, fmt.Errorf("cl_throttle.tsv line %d: result %q: %w", line, w, err)
			}
		}
		rows = append(rows, r)
	}
	return rows, nil
}
