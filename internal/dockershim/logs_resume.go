package dockershim

import (
	"context"
	"fmt"
	"os"

	"go.uber.org/zap"
)

// resumeLogs restarts the log copiers of containers that ran while the shim was down:
// each one resumes after the last line already in its CRI log, backfilling from
// Docker's own log what arrived in between. Only containers of this shim's
// sandboxes (a checkpoint in its root directory) are taken: another shim on the
// same Docker copies its own, and two copiers would write each line twice.
func (s *Service) resumeLogs(ctx context.Context) error {
	cs, err := s.listManaged(ctx, typeContainer)
	if err != nil {
		return fmt.Errorf("list containers: %w", err)
	}
	ids, err := s.checkpoints.List()
	if err != nil {
		return fmt.Errorf("list checkpoints: %w", err)
	}
	own := make(map[string]bool, len(ids))
	for _, id := range ids {
		own[id] = true
	}
	for _, c := range cs {
		path := c.Labels[labelLogPath]
		if path == "" || c.State == "created" || !own[c.Labels[labelSandboxID]] || isSymlink(path) {
			continue
		}
		j, err := s.docker.InspectContainer(ctx, c.ID)
		if err != nil {
			s.logger.Warn("inspect container for log resume", zap.String("container", c.ID), zap.Error(err))
			continue
		}
		s.logs.Follow(s.bgContext(), c.ID, path, j.Config != nil && j.Config.Tty)
	}
	return nil
}

// isSymlink reports whether a container's log path is a symbolic link: the
// log of a container cri-dockerd or the 1.23 dockershim created (in a sandbox
// this shim adopted) links to Docker's own json-file log, which Docker keeps
// writing; there is nothing to copy.
func isSymlink(path string) bool {
	fi, err := os.Lstat(path)
	return err == nil && fi.Mode()&os.ModeSymlink != 0
}
