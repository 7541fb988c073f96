module benchlib/services/go-nethttp-hello

go 1.22
