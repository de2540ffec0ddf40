# Infrastructure: the CDK (Go) app in infra/, its own Go module (library users never download CDK).
# synth runs the app offline (no account, no lookups, no notices or telemetry); diff and deploy need
# AWS credentials and a bootstrapped account (`npx cdk bootstrap`), so they cannot run here.
INFRA_ENV := JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION=20 CDK_DISABLE_CLI_TELEMETRY=true GOFLAGS=-mod=mod
# The CLI is pinned in infra/_cdk/package.json + package-lock.json: a directory whose name starts
# with "_" so that `go test ./...` never walks the Go files inside node_modules.
CDK       := $(INFRA_ENV) _cdk/node_modules/.bin/cdk
CDK_FLAGS := --no-notices --no-version-reporting --lookups=false
CDK_CTX   ?=

.PHONY: infra-deps synth diff deploy destroy infra-test

infra-deps: ## Install the CDK CLI pinned in infra/_cdk/package-lock.json
	@test -x infra/_cdk/node_modules/.bin/cdk || (cd infra/_cdk && npm ci --no-audit --no-fund)

synth: build infra-deps ## Synthesize the stack into infra/cdk.out (CDK_CTX='-c fifo=true …' to configure)
	cd infra && $(CDK) synth $(CDK_FLAGS) --quiet $(CDK_CTX)

diff: build infra-deps ## Diff the stack against the deployed one (needs AWS credentials)
	cd infra && $(CDK) diff $(CDK_FLAGS) $(CDK_CTX)

deploy: build infra-deps ## Deploy the stack (needs AWS credentials and a bootstrapped account)
	cd infra && $(CDK) deploy $(CDK_FLAGS) --require-approval broadening $(CDK_CTX)

destroy: build infra-deps ## Delete the deployed stack (asks first; the table stays if deletion protection is on)
	cd infra && $(CDK) destroy $(CDK_FLAGS) $(CDK_CTX)

infra-test: ## Vet and test the infra module (serial tests: they share one Node process)
	cd infra && $(INFRA_ENV) $(GO) vet ./... && $(INFRA_ENV) $(GO) test -count=1 -p 1 ./...
