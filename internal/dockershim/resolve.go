package dockershim

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/kubelet-dockershim/kubelet/internal/dockershim/libdocker"
)

// inspect returns a Docker object the shim manages. An empty id is InvalidArgument
// naming field; an unknown id, or one that is not of the wanted type ("" = any), is
// NotFound. Docker resolves unique ID prefixes; callers use the returned full ID from
// then on (CNI and checkpoints always get the full ID).
func (s *Service) inspect(ctx context.Context, field, id, wantType string) (libdocker.ContainerJSON, error) {
	if id == "" {
		return libdocker.ContainerJSON{}, invalidArg(field, "must not be empty")
	}
	j, err := s.docker.InspectContainer(ctx, id)
	if err != nil {
		if errors.Is(err, libdocker.ErrNotFound) {
			return j, fmt.Errorf("%w: %s %q", ErrNotFound, field, id)
		}
		return j, err
	}
	if j.Config == nil || j.Config.Labels[labelManaged] != "true" && j.Config.Labels[labelType] == "" {
		return j, fmt.Errorf("%w: %s %q is not managed by the shim", ErrNotFound, field, id)
	}
	if wantType != "" && j.Config.Labels[labelType] != wantType {
		return j, fmt.Errorf("%w: %s %q is not a %s", ErrNotFound, field, id, wantType)
	}
	return j, nil
}

// listManaged lists every container (running or not) of one type, with optional extra
// label filters ("key=value").
func (s *Service) listManaged(ctx context.Context, typ string, extraLabels ...string) ([]libdocker.ContainerSummary, error) {
	pairs := []libdocker.FilterKeyValuePair{libdocker.FilterArg("label", labelType+"="+typ)}
	for _, l := range extraLabels {
		pairs = append(pairs, libdocker.FilterArg("label", l))
	}
	return s.docker.ListContainers(ctx, libdocker.ListOptions{All: true, Filters: libdocker.NewFilterArgs(pairs...)})
}

// parseDockerTime parses Docker's RFC 3339 timestamps; the zero time ("0001-01-01...")
// and bad values give 0.
func parseDockerTime(v string) int64 {
	t, err := time.Parse(time.RFC3339Nano, v)
	if err != nil || t.Year() <= 1 {
		return 0
	}
	return t.UnixNano()
}
