package podforward

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"strings"
)

// execRunner runs the host's binaries.
type execRunner struct{}

func (execRunner) run(ctx context.Context, bin string, args ...string) (string, error) {
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("%w: %s", err, strings.TrimSpace(stderr.String()))
	}
	return stdout.String(), nil
}
