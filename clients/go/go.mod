module github.com/redial-dev/redial/clients/go

go 1.19
