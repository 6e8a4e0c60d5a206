package volumes

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
)

// ErrUnsupportedVolume matches (errors.Is) every UnsupportedVolumeError.
var ErrUnsupportedVolume = errors.New("unsupported volume type")

// needAPIServer are the volume types that read objects from the API server.
var needAPIServer = map[string]bool{
	"configMap":             true,
	"secret":                true,
	"projected":             true,
	"persistentVolumeClaim": true,
	"ephemeral":             true,
}

// UnsupportedVolumeError is returned for a volume type this kubelet cannot set up.
type UnsupportedVolumeError struct {
	// Volume is the volume's name.
	Volume string
	// Type is the volume source field, as in the pod spec ("configMap", "nfs", ...).
	Type string
}

func (e *UnsupportedVolumeError) Error() string {
	if needAPIServer[e.Type] {
		return fmt.Sprintf("%s volumes need an API server (not available in standalone mode)", e.Type)
	}
	return fmt.Sprintf("%s volumes are not supported by this kubelet", e.Type)
}

// Is makes errors.Is(err, ErrUnsupportedVolume) true.
func (e *UnsupportedVolumeError) Is(target error) bool { return target == ErrUnsupportedVolume }

// NeedsAPIServer reports whether the type would work once the kubelet talks to an API
// server.
func (e *UnsupportedVolumeError) NeedsAPIServer() bool { return needAPIServer[e.Type] }

// sourceType returns the spec name of the source set in src, a
// *v1.VolumeSource or *v1.PersistentVolumeSource ("configMap",
// "persistentVolumeClaim", "nfs", ...), or "" when none is set.
func sourceType(src any) string {
	v := reflect.ValueOf(src).Elem()
	t := v.Type()
	for i := range t.NumField() {
		f := v.Field(i)
		if f.Kind() != reflect.Pointer || f.IsNil() {
			continue
		}
		name, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ",")
		if name == "" {
			name = t.Field(i).Name
		}
		return name
	}
	return ""
}
