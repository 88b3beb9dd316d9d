model "m" {ÿþ
}
