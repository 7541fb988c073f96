module benchlib.local/canned-grpc-json

go 1.24

require golang.org/x/net v0.35.0
