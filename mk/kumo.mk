# The emulator as its own process (`kumo serve`), for the tests that need a real server process
# (internal/kumoserve). Its binary is found or built before go test runs, so that a first build (a
# few minutes on a fresh machine; cached under the user cache directory) does not count against
# the test timeout. Without CI=true a failure only warns: those tests then say they were skipped.

.PHONY: kumo

kumo: ## Find or build the kumo binary the tests run as a server (cached in ~/.cache/sqsworker)
	@echo "kumo binary for the tests that run 'kumo serve':"
	@$(GO) run ./internal/kumoserve/kumobin || { [ "$$CI" != true ] && echo "(not available: those tests will be skipped)"; }

unit: kumo
