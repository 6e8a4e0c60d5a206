//go:build !linux

package containerlog

// noFollow is not available here; log paths are followed.
const noFollow = 0
