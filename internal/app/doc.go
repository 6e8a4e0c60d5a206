// Package app is the kubelet binary's entry point: it parses kubelet-compatible flags
// into one validated Config, builds the logger, and runs the selected mode. With
// --experimental-dockershim it starts the dockershim's CRI server and serves until a
// signal. It is the only package that knows both the dockershim and the kubelet side.
//
// Only main imports it.
package app
