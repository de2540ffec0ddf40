package awslocal

import (
	"context"
	"fmt"
	"reflect"
	"sort"
	"strings"

	"github.com/aws/smithy-go/middleware"
)

// The embedded emulator (kumo v0.33.1) reads a DynamoDB expression by replacing each
// placeholder of ExpressionAttributeNames with its name, one after another with
// strings.ReplaceAll, in Go's random map order. When one placeholder begins another (#p and
// #pk), the shorter one is sometimes replaced first, inside the longer one: "attribute_exists(#pk)"
// becomes "attribute_exists(deadk)", and the condition fails, or the update writes another
// attribute, some of the time. DynamoDB itself reads each placeholder as a whole token.
//
// So that such a request fails every time, with the reason, rather than now and then, every
// client of the embedded backend refuses it before it is sent (ErrPlaceholderPrefix). Give
// placeholders that do not begin one another (#prv, not #p beside #pk).

// ErrPlaceholderPrefix is returned, wrapped, for a DynamoDB request to the embedded emulator
// whose ExpressionAttributeNames has a placeholder that begins another one.
var ErrPlaceholderPrefix = fmt.Errorf("awslocal: an expression attribute name placeholder begins another one, which the embedded emulator misreads some of the time")

// guardPlaceholders is the client option (aws.Config.APIOptions) that refuses such requests.
func guardPlaceholders(stack *middleware.Stack) error {
	return stack.Initialize.Add(middleware.InitializeMiddlewareFunc("sqsworkerPlaceholderPrefixes",
		func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
			if err := checkPlaceholders(reflect.ValueOf(in.Parameters), 0); err != nil {
				return middleware.InitializeOutput{}, middleware.Metadata{}, fmt.Errorf("%s: %w", middleware.GetOperationName(ctx), err)
			}
			return next.HandleInitialize(ctx, in)
		}), middleware.Before)
}

// namesField is the field of every DynamoDB input (and of each action of a transaction, each
// table of a batch read) that maps placeholders to attribute names.
const namesField = "ExpressionAttributeNames"

// checkPlaceholders walks an operation's input (structs, pointers and slices of them, maps of
// structs; attribute values are interfaces and are not entered) for ExpressionAttributeNames maps,
// and returns an error naming the first placeholder that begins another one in its map.
func checkPlaceholders(v reflect.Value, depth int) error {
	if depth > 8 {
		return nil
	}
	switch v.Kind() {
	case reflect.Pointer:
		if v.IsNil() {
			return nil
		}
		return checkPlaceholders(v.Elem(), depth+1)
	case reflect.Slice:
		if k := v.Type().Elem().Kind(); k != reflect.Struct && k != reflect.Pointer {
			return nil
		}
		for i := range v.Len() {
			if err := checkPlaceholders(v.Index(i), depth+1); err != nil {
				return err
			}
		}
	case reflect.Map:
		if k := v.Type().Elem().Kind(); k != reflect.Struct && k != reflect.Pointer {
			return nil
		}
		for it := v.MapRange(); it.Next(); {
			if err := checkPlaceholders(it.Value(), depth+1); err != nil {
				return err
			}
		}
	case reflect.Struct:
		t := v.Type()
		for i := range t.NumField() {
			f := t.Field(i)
			if !f.IsExported() {
				continue
			}
			if names, ok := v.Field(i).Interface().(map[string]string); ok && f.Name == namesField {
				if err := placeholderPrefix(names); err != nil {
					return err
				}
				continue
			}
			if err := checkPlaceholders(v.Field(i), depth+1); err != nil {
				return err
			}
		}
	}
	return nil
}

// placeholderPrefix returns an error when a key of names begins another key.
func placeholderPrefix(names map[string]string) error {
	if len(names) < 2 {
		return nil
	}
	keys := make([]string, 0, len(names))
	for k := range names {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	// Sorted, a key that begins others comes right before one of them.
	for i := 1; i < len(keys); i++ {
		if strings.HasPrefix(keys[i], keys[i-1]) {
			return fmt.Errorf("%w: %s begins %s (rename one)", ErrPlaceholderPrefix, keys[i-1], keys[i])
		}
	}
	return nil
}
