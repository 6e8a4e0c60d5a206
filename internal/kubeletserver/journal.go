package kubeletserver

import (
	"context"
	"io"
	"os/exec"
)

// journalctl is the journal of this machine.
type journalctl struct{}

func (journalctl) Units(ctx context.Context) (string, error) {
	out, err := exec.CommandContext(ctx, "journalctl", "--field", "_SYSTEMD_UNIT").CombinedOutput()
	return string(out), err
}

func (journalctl) Run(ctx context.Context, args []string, w io.Writer) error {
	cmd := exec.CommandContext(ctx, "journalctl", args...)
	cmd.Stdout, cmd.Stderr = w, w
	return cmd.Run()
}
