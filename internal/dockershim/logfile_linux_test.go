package dockershim

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/kubelet-dockershim/kubelet/internal/dockershim/containerlog"
	"github.com/kubelet-dockershim/kubelet/internal/dockershim/libdocker"
)

// noLogs is a containerlog.Source that is never asked.
type noLogs struct{}

func (noLogs) ContainerLogs(context.Context, string, libdocker.LogsOptions) (io.ReadCloser, error) {
	return nil, errors.New("not a test of copying")
}

func (noLogs) InspectContainer(context.Context, string) (libdocker.ContainerJSON, error) {
	return libdocker.ContainerJSON{}, errors.New("not a test of copying")
}

// A pod's log directory replaced by a symbolic link out of the log root (by
// a log agent that can write /var/log) before StartContainer: the log file
// and its directory are not created through the link.
func TestEnsureLogFileRefusesLinkedPodDir(t *testing.T) {
	t.Parallel()
	root, outside := filepath.Join(t.TempDir(), "pods"), t.TempDir()
	podDir := filepath.Join(root, "ns_pod_uid")
	if err := os.MkdirAll(root, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, podDir); err != nil {
		t.Fatal(err)
	}
	logs, err := containerlog.NewManager(containerlog.Options{Source: noLogs{}, LogRoot: root})
	if err != nil {
		t.Fatal(err)
	}
	if err := ensureLogFile(logs, podDir, filepath.Join(podDir, "app", "0.log")); err == nil {
		t.Error("ensureLogFile through a link out of the log root succeeded")
	}
	if entries, _ := os.ReadDir(outside); len(entries) != 0 {
		t.Errorf("created outside the log root: %v", entries)
	}
	// A real pod directory works.
	if err := os.Remove(podDir); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(podDir, "app", "0.log")
	if err := ensureLogFile(logs, podDir, path); err != nil {
		t.Fatalf("ensureLogFile: %v", err)
	}
	if fi, err := os.Lstat(path); err != nil || !fi.Mode().IsRegular() || fi.Mode().Perm()&^0o640 != 0 {
		t.Errorf("log file: %v, %v; want a regular file of at most 0640", fi, err)
	}
}
