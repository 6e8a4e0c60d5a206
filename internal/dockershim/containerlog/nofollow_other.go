//go:build !linux

package containerlog

// NoFollow is not available here; log paths are followed.
const NoFollow = 0
