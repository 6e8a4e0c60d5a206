//go:build !linux

package nodestatus

import "errors"

// otherHost reads nothing.
type otherHost struct{}

func newHost() host { return otherHost{} }

func (otherHost) usage(string) (usage, error) {
	return usage{}, errors.New("reading the machine is only supported on linux")
}
