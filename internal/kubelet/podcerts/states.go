package podcerts

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"time"
)

// abandonAfter is how long a PodCertificateRequest this kubelet created may
// stay missing from the informer before it counts as deleted (upstream's
// assumeDeletedThreshold; a jitter is added).
const abandonAfter = 10 * time.Minute

// overdueAfter is how long after beginRefreshAt a certificate not yet replaced
// counts as overdue for refresh (upstream's refreshOverdueDuration).
const overdueAfter = 10 * time.Minute

// maxJitter spreads the requests of many projections: up to 5 minutes are
// added to beginRefreshAt and to the abandon deadline, as upstream does.
const maxJitter = 5 * time.Minute

// jitter returns a random duration in [0, maxJitter).
func jitter() time.Duration { return time.Duration(rand.Int64N(int64(maxJitter))) }

// errNotIssued is the error of a projection whose first certificate has not
// been issued yet (upstream's message).
var errNotIssued = errors.New("credential bundle is not issued yet")

// phase is where a projection is in upstream's state machine:
//
//	initial ──► waiting ──► fresh ──► refreshing ──► fresh …
//	               │                      │
//	               └──► denied / failed ◄─┘
type phase int

const (
	phaseInitial    phase = iota // no request made yet
	phaseWaiting                 // the first request is pending
	phaseFresh                   // a certificate is held, no request pending
	phaseRefreshing              // a certificate is held, its successor's request pending
	phaseDenied                  // a request was denied: final
	phaseFailed                  // a request failed: final
)

// credential is an issued private key and certificate chain with the times
// the signer gave (beginRefreshAt with jitter added).
type credential struct {
	key, chain     []byte
	beginRefreshAt time.Time
	notAfter       time.Time
	// Warnings already emitted for this credential.
	warnedOverdue, warnedExpired bool
}

// pending is a PodCertificateRequest this kubelet created and waits on: its
// name, the private key of its stub request, and when to stop waiting for it
// to show up in the informer.
type pending struct {
	name      string
	key       []byte
	abandonAt time.Time
}

// state is one projection's state: the phase and what the phase holds.
type state struct {
	phase   phase
	current credential // fresh, refreshing
	request pending    // waiting, refreshing
	// reason and message of the denial or failure.
	reason, message string
}

// bundle returns the private key and chain to write, or the error the volume
// reports. waiting is true while the first certificate is awaited (the error
// is errNotIssued then).
func (s *state) bundle() (key, chain []byte, waiting bool, err error) {
	switch s.phase {
	case phaseInitial, phaseWaiting:
		return nil, nil, true, errNotIssued
	case phaseDenied:
		return nil, nil, false, fmt.Errorf("PodCertificateRequest was permanently denied: reason=%q message=%q", s.reason, s.message)
	case phaseFailed:
		return nil, nil, false, fmt.Errorf("PodCertificateRequest was permanently failed: reason=%q message=%q", s.reason, s.message)
	}
	return s.current.key, s.current.chain, false, nil
}

// metricState is the state label of kubelet_podcertificate_states.
func (s *state) metricState(now time.Time) string {
	switch s.phase {
	case phaseInitial, phaseWaiting:
		return "not_yet_issued"
	case phaseDenied:
		return "denied"
	case phaseFailed:
		return "failed"
	}
	switch {
	case now.After(s.current.notAfter):
		return "expired"
	case now.After(s.current.beginRefreshAt.Add(overdueAfter)):
		return "overdue_for_refresh"
	}
	return "fresh"
}
