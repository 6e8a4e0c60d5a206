package images

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kubelet-dockershim/kubelet/internal/promreg"
)

// Reasons of kubelet_image_garbage_collected_total, as upstream.
const (
	reasonAge   = "age"
	reasonSpace = "space"
)

// newCollectedTotal builds kubelet_image_garbage_collected_total and registers
// it with reg (if any), reusing an equal counter registered there before.
func newCollectedTotal(reg prometheus.Registerer) (*prometheus.CounterVec, error) {
	c := prometheus.NewCounterVec(prometheus.CounterOpts{
		Subsystem: "kubelet", Name: "image_garbage_collected_total",
		Help: "[ALPHA] Total number of images garbage collected by the kubelet, whether through disk usage or image age.",
	}, []string{"reason"})
	if reg == nil {
		return c, nil
	}
	c, err := promreg.Register(reg, c)
	if err != nil {
		return nil, fmt.Errorf("images: register metrics: %w", err)
	}
	return c, nil
}
