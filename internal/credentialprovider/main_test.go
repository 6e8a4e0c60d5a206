package credentialprovider

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// testBinDir holds the fake plugins. They are written once, before any test
// runs, so that no test execs a file another test still holds open for
// writing (ETXTBSY).
var testBinDir string

// Plugin scripts. The answering one stores the request in $REQUEST_FILE,
// appends one line per run (its args and $PLUGIN_GREETING) to $RUNS_FILE, and
// prints $RESPONSE_FILE.
const (
	answeringPlugin = `#!/bin/bash
set -eu
cat > "$REQUEST_FILE"
echo "args=$* greeting=${PLUGIN_GREETING:-}" >> "$RUNS_FILE"
cat "$RESPONSE_FILE"
`
	failingPlugin = `#!/bin/bash
cat > /dev/null
echo "registry unreachable" >&2
exit 3
`
)

func TestMain(m *testing.M) {
	os.Exit(runTests(m))
}

func runTests(m *testing.M) int {
	dir, err := os.MkdirTemp("", "credentialprovider-plugins-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	for name, script := range map[string]string{
		"test-plugin":    answeringPlugin,
		"other-plugin":   answeringPlugin,
		"failing-plugin": failingPlugin,
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(script), 0o755); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "not-executable"), []byte(answeringPlugin), 0o644); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	testBinDir = dir
	return m.Run()
}
