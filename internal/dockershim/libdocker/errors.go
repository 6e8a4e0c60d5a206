package libdocker

import "strings"

// isNotFoundText recognises the registry's "manifest unknown"/"not found" answers that
// Docker reports as plain text inside a pull stream.
func isNotFoundText(msg string) bool {
	m := strings.ToLower(msg)
	for _, s := range []string{"manifest unknown", "not found", "does not exist", "repository does not exist"} {
		if strings.Contains(m, s) {
			return true
		}
	}
	return false
}
