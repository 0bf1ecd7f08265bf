#!/bin/sh
# Regenerates the *.pb.go files of this package from proto/ (run by
# `go generate`, from this directory). Every .proto file under proto/protos
# and proto/sqscope maps to this one Go package.
set -eu
plugin=$(go tool -n protoc-gen-go)
pkg=github.com/sqscope/sqscope/export/perfetto
files=$(cd proto && find protos sqscope -name '*.proto' | LC_ALL=C sort)
opts=""
for f in $files; do
	opts="$opts --go_opt=M$f=$pkg;perfetto"
done
rm -f ./*.pb.go
# shellcheck disable=SC2086 # opts and files are lists of words
protoc -I proto --plugin=protoc-gen-go="$plugin" --go_out=. --go_opt=module=$pkg $opts $files
