package sqsevent

import (
	"reflect"
	"testing"
)

// decodeFlat is decodeSegments with its segments joined, and how many there were.
func decodeFlat(payload []byte, parts, minBytes int) ([]Record, int, error) {
	segs, err := decodeSegments(payload, parts, minBytes)
	var out []Record
	for _, s := range segs {
		out = append(out, s...)
	}
	return out, len(segs), err
}

func TestDecodeSegments(t *testing.T) {
	many := lambdaEvent(50, eventOptions{fifo: true, trace: true, msgAttrs: true})
	tests := []struct {
		name    string
		payload []byte
		parts   int
		// segments is how many segments the payload must be decoded in (1: not split).
		segments int
	}{
		{"split in four", many, 4, 4},
		{"split in two", many, 2, 2},
		{"one part", many, 1, 1},
		{"more parts than records", lambdaEvent(3, eventOptions{}), 8, 3},
		{"one record", lambdaEvent(1, eventOptions{}), 4, 1},
		{"not Lambda's form (whitespace)", lambdaEvent(20, eventOptions{indent: true}), 4, 1},
		{"empty", []byte(`{"Records":[]}`), 4, 1},
		// The separator inside an unknown key's array of a record: the split is not a record
		// boundary, the first segment does not end where the next starts, and the whole payload
		// is decoded in one.
		{"separator inside a record", []byte(`{"Records":[{"messageId":"1","x":[{},{"messageId":"2"}],"body":"a"},{"messageId":"3","body":"b"}]}`), 4, 1},
		{"null record", []byte(`{"Records":[{"messageId":"1"},null,{"messageId":"3"},{"messageId":"4"}]}`), 4, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			want, err := Decode(tt.payload)
			if err != nil {
				t.Fatal(err)
			}
			got, n, err := decodeFlat(tt.payload, tt.parts, 1)
			if err != nil {
				t.Fatal(err)
			}
			if n != tt.segments {
				t.Errorf("%d segments, want %d", n, tt.segments)
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("records differ from Decode's:\n got %+v\nwant %+v", got, want)
			}
		})
	}
}

func TestDecodeSegmentsErrors(t *testing.T) {
	// Errors in any part are Decode's, offsets included.
	good := string(lambdaEvent(6, eventOptions{}))
	for _, payload := range []string{
		good[:len(good)/2] + `"x` + good[len(good)/2:],
		good[:len(good)-200] + "\x01" + good[len(good)-200:],
		good[:len(good)-2] + `,]}`,
		good[:len(good)-2] + `,{"messageId":5}]}`,
	} {
		_, wantErr := Decode([]byte(payload))
		if wantErr == nil {
			t.Fatalf("Decode accepted %q", payload)
		}
		_, _, err := decodeFlat([]byte(payload), 4, 1)
		if err == nil || err.Error() != wantErr.Error() {
			t.Errorf("error %v, want Decode's %v", err, wantErr)
		}
	}
}

func TestDecodeSegmentsMinimumSize(t *testing.T) {
	payload := lambdaEvent(10, eventOptions{})
	if _, n, _ := decodeFlat(payload, 4, len(payload)); n != 1 {
		t.Errorf("a payload of one minimum size was split in %d", n)
	}
	if _, n, _ := decodeFlat(payload, 4, len(payload)/2); n != 2 {
		t.Errorf("a payload of two minimum sizes was split in %d, want 2", n)
	}
}

func TestDecodeSegmentsCopiesPayload(t *testing.T) {
	payload := lambdaEvent(8, eventOptions{})
	segs, err := decodeSegments(payload, 4, 1)
	if err != nil || len(segs) < 2 {
		t.Fatalf("%d segments, %v", len(segs), err)
	}
	want := segs[len(segs)-1][0].Body
	for i := range payload {
		payload[i] = 'x'
	}
	if got := segs[len(segs)-1][0].Body; got != want {
		t.Errorf("body changed with the payload: %q", got)
	}
}

// FuzzDecodeSegments checks that DecodeSegments, split as finely as it will, returns exactly what
// Decode returns, records or error, on every input. The seeds (FuzzDecode's, and the same events
// in Lambda's form with several records) run as an ordinary test.
//
//	go test ./internal/sqsevent -run '^$' -fuzz FuzzDecodeSegments -fuzztime 60s
func FuzzDecodeSegments(f *testing.F) {
	for _, seed := range seedEvents() {
		f.Add(seed)
	}
	f.Add(lambdaEvent(5, eventOptions{fifo: true, msgAttrs: true}))
	f.Add([]byte(`{"Records":[{"messageId":"1","x":[{},{"messageId":"2"}]},{"messageId":"3"},{"messageId":"4","body":"},{\"messageId\":\""}]}`))
	f.Fuzz(func(t *testing.T, payload []byte) {
		want, wantErr := Decode(payload)
		got, _, err := decodeFlat(payload, 4, 1)
		if (err == nil) != (wantErr == nil) || (err != nil && err.Error() != wantErr.Error()) {
			t.Fatalf("error %v, Decode's %v", err, wantErr)
		}
		if len(got) == 0 && len(want) == 0 {
			return // nil or empty alike
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("records differ from Decode's for %q:\n got %+v\nwant %+v", payload, got, want)
		}
	})
}
