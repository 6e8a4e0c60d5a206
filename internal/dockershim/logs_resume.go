package dockershim

import (
	"context"
	"fmt"

	"go.uber.org/zap"
)

// resumeLogs restarts the log copiers of containers that ran while the shim was down:
// each one resumes after the last line already in its CRI log, backfilling from
// Docker's own log what arrived in between.
func (s *Service) resumeLogs(ctx context.Context) error {
	cs, err := s.listManaged(ctx, typeContainer)
	if err != nil {
		return fmt.Errorf("list containers: %w", err)
	}
	for _, c := range cs {
		path := c.Labels[labelLogPath]
		if path == "" || c.State == "created" {
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
