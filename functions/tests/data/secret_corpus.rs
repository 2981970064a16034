// Secret shapes that redaction must remove: (text containing a secret, the secret).
// Shared by the redaction unit tests and the storage tests (`include!`d by both).
&[
    (
        "curl -H 'Authorization: Bearer abcdef0123456789abcdef' https://x",
        "abcdef0123456789abcdef",
    ),
    (
        "Authorization: Basic dXNlcjpwYXNzd29yZA==",
        "dXNlcjpwYXNzd29yZA==",
    ),
    (
        "use bearer Zm9vYmFyYmF6cXV4MTIzNDU2Nzg5 for it",
        "Zm9vYmFyYmF6cXV4MTIzNDU2Nzg5",
    ),
    (
        "token=7f3c9a1b2d4e5f60718293a4b5c6d7e8",
        "7f3c9a1b2d4e5f60718293a4b5c6d7e8",
    ),
    ("password=hunter2hunter2", "hunter2hunter2"),
    ("export DB_PASSWORD=\"s3cr3t-value!\"", "s3cr3t-value!"),
    ("secret: topsecretvalue99", "topsecretvalue99"),
    (
        "{\"client_secret\": \"cs_live_9a8b7c6d5e4f\"}",
        "cs_live_9a8b7c6d5e4f",
    ),
    (
        "AWS_ACCESS_KEY_ID=AKIAIOSFODNN7EXAMPLE",
        "AKIAIOSFODNN7EXAMPLE",
    ),
    (
        "aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
        "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
    ),
    (
        "temp key ASIAY34FZKBOKMUTVV7A in use",
        "ASIAY34FZKBOKMUTVV7A",
    ),
    (
        "git clone https://ghp_1234567890abcdefghijklmnopqrstuvwxyzAB@github.com/o/r",
        "ghp_1234567890abcdefghijklmnopqrstuvwxyzAB",
    ),
    (
        "GH token gho_16C7e42F292c6912E7710c838347Ae178B4a here",
        "gho_16C7e42F292c6912E7710c838347Ae178B4a",
    ),
    (
        "github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyz0123456789ABCDEFGHIJKLMNOPQRS",
        "github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyz0123456789ABCDEFGHIJKLMNOPQRS",
    ),
    (
        "GITLAB glpat-xxxxxxxxxxxxxxxxxxxx1234 ok",
        "glpat-xxxxxxxxxxxxxxxxxxxx1234",
    ),
    (
        "jwt eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
        "dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
    ),
    (
        "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEAxyz\nabc123\n-----END RSA PRIVATE KEY-----",
        "MIIEowIBAAKCAQEAxyz",
    ),
    (
        "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA\n",
        "b3BlbnNzaC1rZXktdjEAAAAA",
    ),
    (
        "-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASC\n-----END PRIVATE KEY-----",
        "MIIEvQIBADANBgkqhkiG9w0BAQEFAASC",
    ),
    (
        "postgres://admin:Pa55w0rd!@db.internal:5432/app",
        "Pa55w0rd!",
    ),
    ("https://user:tok3nvalue@example.com/path", "tok3nvalue"),
    (
        "slack xoxb-123456789012-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx",
        "xoxb-123456789012-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx",
    ),
    (
        "stripe sk_live_4eC39HqLyjWDarjtT1zdp7dc",
        "sk_live_4eC39HqLyjWDarjtT1zdp7dc",
    ),
    (
        "OPENAI_KEY sk-proj-abcdefghijklmnopqrstuvwxyz012345",
        "sk-proj-abcdefghijklmnopqrstuvwxyz012345",
    ),
    (
        "anthropic sk-ant-api03-abcdefghijklmnopqrstuvwxyz0123456789",
        "sk-ant-api03-abcdefghijklmnopqrstuvwxyz0123456789",
    ),
    (
        "maps AIzaSyDaGmWKa4JsXZ-HjGw7ISLn_3namBGewQe",
        "AIzaSyDaGmWKa4JsXZ-HjGw7ISLn_3namBGewQe",
    ),
    (
        "//registry.npmjs.org/:_authToken=npm_abcdefghijklmnopqrstuvwxyz0123456789",
        "npm_abcdefghijklmnopqrstuvwxyz0123456789",
    ),
    (
        "wc key wcsk_Li-Fej7Tgt9GL_ZTJ0AvmddyJF0_TD27VYOQZta6AhA",
        "wcsk_Li-Fej7Tgt9GL_ZTJ0AvmddyJF0_TD27VYOQZta6AhA",
    ),
    ("mysql --password=rootpw123 -u root", "rootpw123"),
    ("tool --api-key abcdef123456 --verbose", "abcdef123456"),
    ("api_key: 'qwertyuiop123456'", "qwertyuiop123456"),
    (
        "DefaultEndpointsProtocol=https;AccountName=a;AccountKey=bGlrZXRoaXNpc2Fsb25ncGFzc3dvcmQ=;",
        "bGlrZXRoaXNpc2Fsb25ncGFzc3dvcmQ=",
    ),
    (
        "SENDGRID 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",
        "TwL2iGABf9DHoTf-09kqeF8tAmbihYzrnopKc-1s5cr",
    ),
    (
        "HF_TOKEN hf_abcdefghijklmnopqrstuvwxyzABCDEF",
        "hf_abcdefghijklmnopqrstuvwxyzABCDEF",
    ),
    (
        "refresh_token=1//0gabcdefghijklmnop",
        "1//0gabcdefghijklmnop",
    ),
    (
        "passphrase => correct-horse-battery",
        "correct-horse-battery",
    ),
]
