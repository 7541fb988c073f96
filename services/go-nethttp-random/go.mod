module benchlib/services/go-nethttp-random

go 1.22
