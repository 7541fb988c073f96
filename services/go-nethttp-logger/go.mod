// The seed had no go.mod (`go run main.go` on a single file). This one names the module and
// sets the language version of January 2024 (Go 1.21; 1.22 came out on 2024-02-06), which
// also selects Go 1.21's GODEBUG defaults (e.g. httpmuxgo121=1: the pre-1.22 ServeMux).
module benchlib/services/go-nethttp-logger

go 1.21
