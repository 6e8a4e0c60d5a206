//go:build linux

package runtimeclass

import (
	"os"
	"testing"

	"github.com/kubelet-dockershim/kubelet/internal/testutil/controlplane"
)

// shared is the package's control plane, started by the first test that
// needs it and stopped by TestMain.
var shared controlplane.Shared

func TestMain(m *testing.M) { os.Exit(shared.Run(m)) }
