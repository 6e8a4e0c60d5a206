//go:build !linux

package volumes

import (
	"context"
	"errors"

	"github.com/kubelet-dockershim/kubelet/internal/procfs"
)

var errNotLinux = errors.New("volume mounts are only supported on Linux")

func mountTmpfs(string, int64) error { return errNotLinux }

func unmount(string) error { return errNotLinux }

func bindMount(string, string, bool, []string) ([]string, error) { return nil, errNotLinux }

// mountPointsUnder reports no mounts: nothing can have been mounted.
func mountPointsUnder(string) ([]string, error) { return nil, nil }

func mountsUnder(string) ([]procfs.Mount, error) { return nil, nil }

func unmountFS(string, string) error { return errNotLinux }

func mountFSType(string) (string, error) { return "", nil }

func runMount(context.Context, ...string) (string, error) { return "", errNotLinux }
