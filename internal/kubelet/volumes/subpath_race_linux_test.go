package volumes

import (
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"

	"golang.org/x/sys/unix"
)

// raceIterations is how many subPaths each lookup resolves while a component
// is being swapped; up to raceMaxIterations until one resolved inside (the
// kernel favours seeing the link: a walk into the directory that races with
// the rename is retried).
const (
	raceIterations    = 2000
	raceMaxIterations = 20000
)

// (c) CVE-2017-1002101: while a goroutine keeps exchanging the directory
// vol/a with a symbolic link to "/", the subPath a/<outside>/ resolves either
// to vol/a/<outside> or is refused; the mount returned must never show the
// host's <outside> (whose marker says HOST), however the swap interleaves with
// the resolution and the later reads through the returned path.
//
// Not parallel: the renames make concurrent openat2 ".." steps retry.
func TestBindSubPathSymlinkSwapRace(t *testing.T) {
	for _, l := range lookups {
		t.Run(l.name, func(t *testing.T) {
			f := newSubPathFixture(t)
			rel := strings.TrimPrefix(f.outside, "/")
			inside := filepath.Join(f.vol, "a", rel)
			mustMkdir(t, inside)
			mustWrite(t, filepath.Join(inside, "marker"), "inside")
			mustSymlink(t, "/", filepath.Join(f.vol, "evil"))
			sp := f.subPath("a/"+rel, 0)

			stop := make(chan struct{})
			var wg sync.WaitGroup
			wg.Add(1)
			go func() {
				defer wg.Done()
				a, evil := filepath.Join(f.vol, "a"), filepath.Join(f.vol, "evil")
				for i := 0; ; {
					select {
					case <-stop:
						return
					default:
					}
					if err := unix.Renameat2(unix.AT_FDCWD, a, unix.AT_FDCWD, evil, unix.RENAME_EXCHANGE); err != nil {
						t.Errorf("exchange: %v", err)
						return
					}
					if i++; i%2 == 0 {
						runtime.Gosched() // vary how long each state lasts
					}
				}
			}()
			defer wg.Wait()
			defer close(stop)

			var mounted, refused int
			for i := 0; i < raceIterations || (mounted == 0 && i < raceMaxIterations); i++ {
				got, err := bindSubPath(sp, l.lookup)
				if errors.Is(err, ErrSubPathEscapes) {
					refused++
					continue
				}
				if err != nil {
					t.Fatalf("iteration %d: %v", i, err)
				}
				b, err := os.ReadFile(filepath.Join(got, "marker"))
				if err != nil || string(b) != "inside" {
					t.Fatalf("iteration %d: the subPath mount shows %q (%v): host content outside the volume", i, b, err)
				}
				if err := unix.Unmount(got, 0); err != nil {
					t.Fatalf("unmount %s: %v", got, err)
				}
				mounted++
			}
			t.Logf("%d mounted inside the volume, %d refused as escapes", mounted, refused)
			if mounted == 0 || refused == 0 {
				t.Errorf("the race was not exercised: %d mounted, %d refused", mounted, refused)
			}
		})
	}
}
