"""Writes the SQL script of the sqlite3 benchmark workload (bench/run).

    python3 gen_sql.py ROWS > script.sql
    sqlite3 :memory: ".read script.sql"

The script inserts ROWS rows into an in-memory database one INSERT statement at a time (in
transactions of 10,000), builds two indexes, and runs point lookups, range scans, a join and
grouped aggregates over them. Deterministic (LCG); no randomness from sqlite itself.
"""
import sys


def main():
    rows = int(sys.argv[1]) if len(sys.argv) > 1 else 200000
    out = sys.stdout
    w = out.write
    w("PRAGMA journal_mode=MEMORY;\n")
    w("CREATE TABLE item(id INTEGER PRIMARY KEY, name TEXT, category INTEGER, price REAL,"
      " note TEXT);\n")
    w("CREATE TABLE category(id INTEGER PRIMARY KEY, label TEXT);\n")
    for c in range(100):
        w("INSERT INTO category VALUES(%d, 'category-%d');\n" % (c, c))
    x = 12345
    for i in range(rows):
        if i % 10000 == 0:
            w("BEGIN;\n")
        x = (x * 1103515245 + 12345) & 0x7FFFFFFF
        w("INSERT INTO item VALUES(%d, 'item-%08x', %d, %d.%02d, '%s');\n"
          % (i, x, x % 100, x % 10000, x % 100, "n" * (x % 40)))
        if i % 10000 == 9999 or i == rows - 1:
            w("COMMIT;\n")
    w("CREATE INDEX item_name ON item(name);\n")
    w("CREATE INDEX item_category_price ON item(category, price);\n")
    x = 999
    for q in range(2000):
        x = (x * 1103515245 + 12345) & 0x7FFFFFFF
        w("SELECT count(*) FROM item WHERE name >= 'item-%08x' AND name < 'item-%08x';\n"
          % (x, x + 0x100000))
        if q % 10 == 0:
            w("SELECT id, price FROM item WHERE category = %d AND price BETWEEN %d AND %d"
              " ORDER BY price LIMIT 5;\n" % (x % 100, x % 5000, x % 5000 + 200))
    w("SELECT c.label, count(*), round(avg(i.price), 2), max(length(i.note)) FROM item i"
      " JOIN category c ON c.id = i.category GROUP BY c.label ORDER BY 2 DESC LIMIT 10;\n")
    w("SELECT category, group_concat(name) FROM (SELECT * FROM item ORDER BY price LIMIT 5000)"
      " GROUP BY category ORDER BY category LIMIT 3;\n")
    w("UPDATE item SET note = note || 'u' WHERE id % 7 = 0;\n")
    w("DELETE FROM item WHERE id % 3 = 0;\n")
    w("SELECT count(*), sum(price) FROM item;\n")


if __name__ == "__main__":
    main()
