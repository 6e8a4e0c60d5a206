package controlplane

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// startTimeout bounds how long Shared.Get waits for the control plane.
const startTimeout = 10 * time.Minute

// Shared is the one control plane of a test package: started by the first
// test that calls Get, stopped (and its state dir removed) by Run in TestMain.
//
//	var shared controlplane.Shared
//
//	func TestMain(m *testing.M) { os.Exit(shared.Run(m)) }
//
//	func TestIntegrationX(t *testing.T) {
//		c := shared.Get(t)
//		...
//	}
//
// Its zero value is ready to use; it must not be copied.
type Shared struct {
	once sync.Once
	dir  string
	c    *Cluster
	err  error
}

// Get returns the package's control plane, starting it on first use. The
// test fails (never skips) when it cannot start; so do the later ones.
func (s *Shared) Get(t testing.TB) *Cluster {
	t.Helper()
	s.once.Do(func() {
		prefix := strings.TrimSuffix(filepath.Base(os.Args[0]), ".test") + "-cp-"
		if s.dir, s.err = os.MkdirTemp("", prefix); s.err != nil {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
		defer cancel()
		s.c, s.err = Start(ctx, s.dir)
	})
	if s.err != nil {
		t.Fatalf("control plane: %v", s.err)
	}
	return s.c
}

// Stop stops the control plane if a test started it and removes its state
// dir. For a TestMain that does more than Run.
func (s *Shared) Stop() error {
	var err error
	if s.c != nil {
		err = s.c.Stop()
		s.c = nil
	}
	if s.dir != "" {
		err = errors.Join(err, os.RemoveAll(s.dir))
		s.dir = ""
	}
	return err
}

// Run runs the tests and then Stop, for TestMain: os.Exit(shared.Run(m)). A
// failing Stop is printed and fails the run.
func (s *Shared) Run(m *testing.M) int {
	code := m.Run()
	if err := s.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, "stop the control plane:", err)
		if code == 0 {
			code = 1
		}
	}
	return code
}
