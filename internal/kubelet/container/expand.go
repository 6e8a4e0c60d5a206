package container

import "strings"

// Variable references in a container's command and args follow the Kubernetes API
// rules (the same rules apply to env values, which the kubelet resolves before they
// reach us):
//
//   - $(NAME) is replaced by the value of the environment variable NAME;
//   - $(NAME) of an undefined variable is left exactly as written;
//   - $$ is an escaped $: it becomes a single $ and is never the start of a reference,
//     so $$(NAME) becomes the literal text $(NAME);
//   - any other $ (a trailing $, $X, an unterminated "$(") is copied unchanged.

// Expand expands the $(NAME) references of s. lookup reports a variable's value
// and whether it is defined.
func Expand(s string, lookup func(name string) (string, bool)) string {
	if !strings.Contains(s, "$") {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c != '$' || i+1 == len(s) {
			b.WriteByte(c)
			continue
		}
		switch next := s[i+1]; next {
		case '$': // escaped operator
			b.WriteByte('$')
			i++
		case '(':
			end := strings.IndexByte(s[i+2:], ')')
			if end < 0 {
				// An unterminated reference is literal text; keep scanning after "$(".
				b.WriteString("$(")
				i++
				continue
			}
			name := s[i+2 : i+2+end]
			if v, ok := lookup(name); ok {
				b.WriteString(v)
			} else {
				b.WriteString("$(" + name + ")")
			}
			i += 2 + end
		default: // a lone operator followed by an ordinary character
			b.WriteByte('$')
			b.WriteByte(next)
			i++
		}
	}
	return b.String()
}
