package vm

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kubelet-dockershim/kubelet/internal/testutil/cmdtest"
)

func TestVMName(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		desc, name, want string
	}{
		{desc: "short", name: "cg2", want: "kds-cg2-0a1b2c3d"},
		{desc: "cut to 40 characters", name: strings.Repeat("n", 50), want: "kds-" + strings.Repeat("n", 27) + "-0a1b2c3d"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			got := vmName(tc.name, "0a1b2c3d")
			if got != tc.want {
				t.Errorf("vmName(%q) = %q, want %q", tc.name, got, tc.want)
			}
			if len(got) > 40 {
				t.Errorf("vmName(%q) has %d characters, vm.sh takes at most 40", tc.name, len(got))
			}
		})
	}
}

func TestFindScript(t *testing.T) {
	p, err := findScript()
	if err != nil {
		t.Fatal(err)
	}
	if want, _ := filepath.Abs("../../../scripts/vm.sh"); p != want {
		t.Errorf("findScript() = %q, want %q", p, want)
	}
}

// TestStartWithoutImage: a missing image fails the test (no skip) and names
// the command that builds it.
func TestStartWithoutImage(t *testing.T) {
	t.Setenv("KDS_CACHE_DIR", t.TempDir())
	msg := cmdtest.FatalOf(t, func(rec testing.TB) {
		Start(rec, Options{Name: "no-image"})
	})
	if !strings.Contains(msg, "scripts/vm.sh image") {
		t.Errorf("Start without an image failed with %q, want a message naming scripts/vm.sh image", msg)
	}
}

func TestCheckImage(t *testing.T) {
	cache := t.TempDir()
	if err := checkImage(cache); err == nil {
		t.Fatal("checkImage of an empty cache: no error")
	}
	img := filepath.Join(cache, "images", "0123456789abcdef")
	if err := os.MkdirAll(img, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(img, "hash"), []byte("0123456789abcdef\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("images/0123456789abcdef", filepath.Join(cache, "current")); err != nil {
		t.Fatal(err)
	}
	if err := checkImage(cache); err != nil {
		t.Errorf("checkImage with current/hash: %v", err)
	}
}
