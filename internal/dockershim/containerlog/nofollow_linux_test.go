package containerlog

import (
	"os"
	"path/filepath"
	"testing"
)

// A symbolic link planted at a log path is neither written through nor
// truncated through, and a new log file is created 0640.
func TestLogFileRefusesSymlink(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	target := filepath.Join(dir, "target")
	if err := os.WriteFile(target, []byte("precious\nno newline"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, filepath.Join(dir, "0.log")); err != nil {
		t.Fatal(err)
	}
	d := openTestDir(t, dir)
	if f, err := openLog(d, "0.log"); err == nil {
		f.Close()
		t.Error("openLog followed a symbolic link")
	}
	if err := truncateIncomplete(d, "0.log"); err == nil {
		t.Error("truncateIncomplete followed a symbolic link")
	}
	if b, _ := os.ReadFile(target); string(b) != "precious\nno newline" {
		t.Errorf("the link's target changed: %q", b)
	}
	f, err := openLog(d, "1.log")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil || fi.Mode().Perm()&^0o640 != 0 {
		t.Errorf("new log file mode = %v, %v; want at most 0640", fi.Mode(), err)
	}
}
