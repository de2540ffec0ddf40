// Command badfn does not compile: the build-failure test of `sqsworker run --function`.
package main

func main() { undefinedFunction() }
