package images

import (
	"errors"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
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
	err := reg.Register(c)
	if err == nil {
		return c, nil
	}
	var are prometheus.AlreadyRegisteredError
	if errors.As(err, &are) {
		if existing, ok := are.ExistingCollector.(*prometheus.CounterVec); ok {
			return existing, nil
		}
	}
	return nil, fmt.Errorf("images: register metrics: %w", err)
}
