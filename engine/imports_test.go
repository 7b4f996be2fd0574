package engine

import (
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestEngineReadsNoClockFileOrTimer holds the engine to its first
// invariant: it is deterministic, so it imports no package that reads the
// clock, the disk or the network, and among Sluice's packages only shard
// and its own ratelimit. Durability and replication wrap it from outside.
func TestEngineReadsNoClockFileOrTimer(t *testing.T) {
	allowed := map[string]map[string]bool{
		".": set("encoding/binary", "errors", "fmt", "log/slog", "runtime", "runtime/debug", "slices",
			"strconv", "strings", "sync", "sync/atomic", "math", "math/big", "math/bits", "bytes",
			"github.com/sluicehq/sluice/engine/ratelimit", "github.com/sluicehq/sluice/shard",
			"github.com/sluicehq/sluice/engine/glob", "github.com/cespare/xxhash/v2"), // KEYS and SCAN glob patterns
		"ratelimit": set("errors", "math/bits"),
		"glob":      set(),
	}
	for dir, ok := range allowed {
		files, err := filepath.Glob(filepath.Join(dir, "*.go"))
		if err != nil || len(files) == 0 {
			t.Fatalf("%s: no Go files (%v)", dir, err)
		}
		for _, name := range files {
			if strings.HasSuffix(name, "_test.go") {
				continue
			}
			f, err := parser.ParseFile(token.NewFileSet(), name, nil, parser.ImportsOnly)
			if err != nil {
				t.Fatal(err)
			}
			for _, imp := range f.Imports {
				path, _ := strconv.Unquote(imp.Path.Value)
				if !ok[path] {
					t.Errorf("%s imports %s: the engine must read no clock, file or timer and depend only on shard", name, path)
				}
			}
		}
	}
}

func set(items ...string) map[string]bool {
	m := make(map[string]bool, len(items))
	for _, it := range items {
		m[it] = true
	}
	return m
}
