package dns

import (
	"errors"
	"strings"
)

// ResolvConf is what the kubelet uses of a resolv.conf file.
type ResolvConf struct {
	// Nameservers accumulate over "nameserver" lines.
	Nameservers []string
	// Searches come from the last "search" line, trailing dots removed.
	Searches []string
	// Options come from the last "options" line, one element per option.
	Options []string
}

// ParseResolvConf parses resolv.conf content. Comment lines ("#" or ";") and unknown
// keywords are ignored; a "nameserver" line without an address is an error (the other
// lines are still parsed and returned).
func ParseResolvConf(data []byte) (ResolvConf, error) {
	rc := ResolvConf{Nameservers: []string{}, Searches: []string{}, Options: []string{}}
	var errs []error
	for line := range strings.SplitSeq(string(data), "\n") {
		trimmed := strings.TrimSpace(line)
		if strings.HasPrefix(trimmed, "#") || strings.HasPrefix(trimmed, ";") {
			continue
		}
		fields := strings.Fields(trimmed)
		if len(fields) == 0 {
			continue
		}
		switch fields[0] {
		case "nameserver":
			if len(fields) < 2 {
				errs = append(errs, errors.New("nameserver list is empty"))
				continue
			}
			rc.Nameservers = append(rc.Nameservers, fields[1])
		case "search":
			rc.Searches = []string{}
			for _, s := range fields[1:] {
				// The same domain with and without the trailing dot counts once.
				if s != "." {
					s = strings.TrimSuffix(s, ".")
				}
				rc.Searches = append(rc.Searches, s)
			}
		case "options":
			rc.Options = append([]string{}, fields[1:]...)
		}
	}
	return rc, errors.Join(errs...)
}
