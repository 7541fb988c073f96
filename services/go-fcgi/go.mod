module benchlib/go-fcgi

go 1.22
