package main

// maxArgsDepth bounds the nesting of a job's args: arrays and objects, the args object itself
// counting as one. Deep enough for any job's data, and it keeps what follows cheap: validating a
// recursive schema against a 20 KB body nested 9,990 deep took 1.6 s (encoding/json allows
// 10,000 levels).
const maxArgsDepth = 64

// maxBodyDepth is maxArgsDepth inside the request object.
const maxBodyDepth = maxArgsDepth + 1

// nestedDeeper reports whether the JSON text b nests arrays and objects more than limit deep.
// One pass over the bytes, before anything decodes them: brackets inside strings do not count
// (a string ends at a quote no backslash escapes), and what is not JSON is left to the decoder
// to refuse.
func nestedDeeper(b []byte, limit int) bool {
	depth := 0
	for i := 0; i < len(b); i++ {
		switch b[i] {
		case '"':
			for i++; i < len(b) && b[i] != '"'; i++ {
				if b[i] == '\\' {
					i++
				}
			}
		case '{', '[':
			depth++
			if depth > limit {
				return true
			}
		case '}', ']':
			depth--
		}
	}
	return false
}
