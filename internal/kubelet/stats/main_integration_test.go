//go:build linux

package stats

import (
	"os"
	"testing"

	"github.com/kubelet-dockershim/kubelet/internal/testutil/shim"
)

// kubelet is the binary the package's shim-only instances run, built by the
// first test that needs it and removed by TestMain.
var kubelet shim.Binary

func TestMain(m *testing.M) { os.Exit(kubelet.Run(m)) }
