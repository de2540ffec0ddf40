package awslocal

import (
	"context"
	"errors"
	"sync"
)

// LocalStack is LocalStack in Docker, started with testcontainers-go by the package
// github.com/sqsworker/sqsworker/pkg/awslocal/localstack, which registers it when imported. It is
// kept out of this package so that a program using the embedded emulator does not depend on
// testcontainers-go and the Docker client.
const LocalStack Kind = "localstack"

// LocalStackPackage is the import path of the package that registers the LocalStack backend.
const LocalStackPackage = "github.com/sqsworker/sqsworker/pkg/awslocal/localstack"

// BackendEnv names the environment variable that selects the backend of Start and Shared:
// "embedded" (the default), "localstack" (Docker needed, and LocalStackPackage imported), or
// "endpoint" (AWS_ENDPOINT_URL).
const BackendEnv = "SQSWORKER_BACKEND"

// ErrNoDocker is returned when a backend that runs in Docker (LocalStack) is asked for and no
// Docker engine answers.
var ErrNoDocker = errors.New("awslocal: LocalStack needs a running Docker engine, and none answers")

// Starter starts a backend that runs outside this process and returns the endpoint URL every
// client uses and a function that stops it. Start calls it with its own context.
type Starter func(ctx context.Context) (url string, stop func(), err error)

var starters struct {
	sync.RWMutex
	m map[Kind]Starter
}

// Register makes Start and Shared able to start backends of kind (selected by Options.Backend
// or BackendEnv): clients of such a backend get fixed test credentials, as on the embedded
// emulator. A package that provides a backend calls it from its init function; registering a kind
// twice, or Embedded or Endpoint, panics.
func Register(kind Kind, start Starter) {
	if kind == "" || kind == Embedded || kind == Endpoint || start == nil {
		panic("awslocal: Register of backend " + string(kind) + ": a new kind and a non-nil Starter are required")
	}
	starters.Lock()
	defer starters.Unlock()
	if _, dup := starters.m[kind]; dup {
		panic("awslocal: backend " + string(kind) + " registered twice")
	}
	if starters.m == nil {
		starters.m = make(map[Kind]Starter)
	}
	starters.m[kind] = start
}

// starter returns the registered Starter of kind, or nil.
func starter(kind Kind) Starter {
	starters.RLock()
	defer starters.RUnlock()
	return starters.m[kind]
}
