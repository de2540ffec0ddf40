// Package decoders compares JSON decoders on Lambda's SQS event payload: encoding/json,
// github.com/goccy/go-json, github.com/valyala/fastjson and sqsworker's internal/sqsevent.
// It is its own module so that the root module does not depend on the libraries it measures.
//
//	cd bench/decoders && go test -bench . -benchmem
package decoders
