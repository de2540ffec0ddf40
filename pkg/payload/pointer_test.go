package payload_test

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/sqsworker/sqsworker/pkg/payload"
)

// The golden files hold pointer bodies exactly as the extended client libraries write them:
// Java (Jackson, no spaces, current and legacy class), Python (json.dumps: ", " and ": ").
func readGolden(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestPointerAppendJSONMatchesJava(t *testing.T) {
	t.Parallel()
	p := payload.Pointer{Bucket: "jobs-payloads", Key: "sqsworker/01JDQ3ZV5XG8K2M4N6P8R0T2V5"}
	if got, want := p.Body(), readGolden(t, "pointer-java.json"); got != want {
		t.Fatalf("Body() =\n%s\nwant (the Java library's bytes)\n%s", got, want)
	}
	legacy := payload.Pointer{Bucket: "jobs-payloads", Key: "1638422c-ea5d-4d15-85d6-ff616977e002", Class: payload.LegacyPointerClass}
	if got, want := legacy.Body(), readGolden(t, "pointer-java-legacy.json"); got != want {
		t.Fatalf("legacy Body() = %s, want %s", got, want)
	}
	// Characters JSON must escape are escaped; HTML characters are not (Jackson does not).
	odd := payload.Pointer{Bucket: "b-1", Key: `a"b\c<&>/é`}
	if got, want := odd.Body(), `["software.amazon.payloadoffloading.PayloadS3Pointer",{"s3BucketName":"b-1","s3Key":"a\"b\\c<&>/é"}]`; got != want {
		t.Fatalf("Body() = %s, want %s", got, want)
	}
	back, err := payload.ParsePointer(odd.Body())
	if err != nil || back.Key != odd.Key {
		t.Fatalf("ParsePointer(Body()) = %+v, %v", back, err)
	}
}

func TestParsePointerGolden(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		file, class, key string
	}{
		{"pointer-java.json", payload.PointerClass, "sqsworker/01JDQ3ZV5XG8K2M4N6P8R0T2V5"},
		{"pointer-java-legacy.json", payload.LegacyPointerClass, "1638422c-ea5d-4d15-85d6-ff616977e002"},
		{"pointer-python.json", payload.PointerClass, "c71eb2ae-37e0-4265-8909-32f4153faddf"},
	} {
		body := readGolden(t, c.file)
		if !payload.MaybePointer(body) {
			t.Errorf("%s: MaybePointer = false", c.file)
		}
		p, err := payload.ParsePointer(body)
		if err != nil {
			t.Errorf("%s: %v", c.file, err)
			continue
		}
		if p.Bucket != "jobs-payloads" || p.Key != c.key || p.Class != c.class {
			t.Errorf("%s: got %+v", c.file, p)
		}
	}
}

func TestParsePointerRejects(t *testing.T) {
	t.Parallel()
	for _, body := range []string{
		``,
		`{"v":1}`,
		`hello`,
		`[]`,
		`["software.amazon.payloadoffloading.PayloadS3Pointer"]`,
		`["software.amazon.payloadoffloading.PayloadS3Pointer",{"s3BucketName":"b","s3Key":"k"},1]`,
		`["java.lang.Object",{"s3BucketName":"b","s3Key":"k"}]`,
		`[1,{"s3BucketName":"b","s3Key":"k"}]`,
		`["software.amazon.payloadoffloading.PayloadS3Pointer",["b","k"]]`,
		`["software.amazon.payloadoffloading.PayloadS3Pointer",{"s3Key":"k"}]`,
		`["software.amazon.payloadoffloading.PayloadS3Pointer",{"s3BucketName":"b","s3Key":""}]`,
		`["software.amazon.payloadoffloading.PayloadS3Pointer",{"s3BucketName":"b","s3Key":"k"}`,
	} {
		if p, err := payload.ParsePointer(body); !errors.Is(err, payload.ErrNotPointer) {
			t.Errorf("ParsePointer(%q) = %+v, %v; want ErrNotPointer", body, p, err)
		}
	}
	// Unknown fields and whitespace are accepted, as the Java reader accepts them.
	p, err := payload.ParsePointer(" [ \"software.amazon.payloadoffloading.PayloadS3Pointer\" , {\"s3Key\":\"k\",\"extra\":true,\"s3BucketName\":\"b\"} ]\n")
	if err != nil || p.Bucket != "b" || p.Key != "k" {
		t.Fatalf("ParsePointer with whitespace and an unknown field = %+v, %v", p, err)
	}
}

func TestSizeFrom(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		attrs map[string]string
		size  int64
		name  string
		ok    bool
	}{
		{map[string]string{payload.SizeAttribute: "5242880"}, 5242880, payload.SizeAttribute, true},
		{map[string]string{payload.LegacySizeAttribute: "817330"}, 817330, payload.LegacySizeAttribute, true},
		{map[string]string{payload.SizeAttribute: "1", payload.LegacySizeAttribute: "2"}, 1, payload.SizeAttribute, true},
		{map[string]string{payload.SizeAttribute: "-1"}, 0, payload.SizeAttribute, false},
		{map[string]string{"other": "1"}, 0, "", false},
	} {
		size, name, ok := payload.SizeFrom(func(n string) (string, bool) { v, ok := c.attrs[n]; return v, ok })
		if size != c.size || name != c.name || ok != c.ok {
			t.Errorf("SizeFrom(%v) = %d %q %v, want %d %q %v", c.attrs, size, name, ok, c.size, c.name, c.ok)
		}
	}
}
