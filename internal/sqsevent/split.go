package sqsevent

import (
	"bytes"
	"slices"

	"github.com/sqsworker/sqsworker/internal/fanout"
)

// MinSegmentBytes is the least payload a segment of [DecodeSegments] is given: below it, starting
// a goroutine costs more than the decode it takes over.
const MinSegmentBytes = 128 << 10

// DecodeSegments reads Lambda's SQS event payload as [Decode] does, split over up to parts
// goroutines: it returns the records in order, as consecutive segments (flattened, exactly what
// Decode returns; a single segment when the payload is not split).
//
// A payload is split only in Lambda's own form, {"Records":[…]} without whitespace around the
// array, and only where a record ends and the next begins ("},{"messageId":"): each segment is
// decoded on its own, into blocks of its own, and must end exactly where the
// next one starts. A split that is not a record boundary (the separator inside a string or a
// nested object) or a payload with an error in any part falls back to Decode of the whole payload,
// so that the records, and any error and its offset, are Decode's.
func DecodeSegments(payload []byte, parts int) ([][]Record, error) {
	return decodeSegments(payload, parts, MinSegmentBytes)
}

// The fixed frame of Lambda's event and the text between two of its records.
const (
	eventPrefix     = `{"Records":[`
	eventSuffix     = `]}`
	recordSeparator = `},{"messageId":"`
)

func decodeSegments(payload []byte, parts, minBytes int) ([][]Record, error) {
	bounds := splitPoints(payload, parts, minBytes)
	if bounds != nil {
		segs := make([][]Record, len(bounds)-1)
		ok := make([]bool, len(segs))
		fanout.Run(len(segs), func(k int) {
			// Segment k: its records, separated by commas, up to the comma before the next
			// segment (or the closing "]"), which is not part of it.
			segs[k], ok[k] = decodeList(payload[bounds[k] : bounds[k+1]-1])
		})
		if !slices.Contains(ok, false) {
			return segs, nil
		}
	}
	recs, err := Decode(payload)
	if err != nil {
		return nil, err
	}
	return [][]Record{recs}, nil
}

// splitPoints returns the offsets where the segments start, followed by the offset after the
// last one's closing "]" (so segment k ends before the byte at bounds[k+1]-1), or nil when the
// payload is not split: too small for two segments, or not in Lambda's form.
func splitPoints(payload []byte, parts, minBytes int) []int {
	parts = min(parts, len(payload)/max(minBytes, 1))
	if parts < 2 || !bytes.HasPrefix(payload, []byte(eventPrefix)) || !bytes.HasSuffix(payload, []byte(eventSuffix)) {
		return nil
	}
	first, last := len(eventPrefix), len(payload)-len(eventSuffix) // the array's contents
	bounds := append(make([]int, 0, parts+1), first)
	for k := 1; k < parts; k++ {
		from := max(first+k*(last-first)/parts, bounds[len(bounds)-1])
		j := bytes.Index(payload[from:last], []byte(recordSeparator))
		if j < 0 {
			break
		}
		bounds = append(bounds, from+j+2) // the next record's '{'
	}
	if len(bounds) < 2 {
		return nil
	}
	return append(bounds, last+1)
}

// decodeList decodes part, a comma-separated list of records (the contents of Records, or a run
// of them), into blocks of its own. It reports false when part is not exactly such a list.
func decodeList(part []byte) ([]Record, bool) {
	d := newDecoder(part)
	recs, end, err := d.elements(0, false)
	return recs, err == nil && end == len(part)
}
