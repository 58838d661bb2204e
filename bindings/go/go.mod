module sandgate.dev/sandgate

go 1.24
