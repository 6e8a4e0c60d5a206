package images

import (
	"fmt"
	"time"
)

// Policy is the image GC policy: the kubelet's imageGCHighThresholdPercent,
// imageGCLowThresholdPercent, imageMinimumGCAge and imageMaximumGCAge.
type Policy struct {
	// HighThresholdPercent: image filesystem usage at or above it starts a
	// space collection.
	HighThresholdPercent int
	// LowThresholdPercent: the usage a space collection frees down to.
	LowThresholdPercent int
	// MinAge: images detected more recently are never removed for space.
	MinAge time.Duration
	// MaxAge: images unused for longer are removed regardless of usage;
	// 0 disables it.
	MaxAge time.Duration
}

// validate checks the thresholds, with upstream's messages.
func (p Policy) validate() error {
	if p.HighThresholdPercent < 0 || p.HighThresholdPercent > 100 {
		return fmt.Errorf("invalid HighThresholdPercent %d, must be in range [0-100]", p.HighThresholdPercent)
	}
	if p.LowThresholdPercent < 0 || p.LowThresholdPercent > 100 {
		return fmt.Errorf("invalid LowThresholdPercent %d, must be in range [0-100]", p.LowThresholdPercent)
	}
	if p.LowThresholdPercent > p.HighThresholdPercent {
		return fmt.Errorf("LowThresholdPercent %d can not be higher than HighThresholdPercent %d",
			p.LowThresholdPercent, p.HighThresholdPercent)
	}
	return nil
}

// gcDisabled reports whether the periodic collection is off, as upstream's
// StartGarbageCollection decides: nothing can ever be over a 100% threshold
// and no maximum age is set.
func (p Policy) gcDisabled() bool {
	return p.HighThresholdPercent == 100 && p.MaxAge == 0
}
