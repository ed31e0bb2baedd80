-- SPDX-License-Identifier: Apache-2.0
-- golden.sql -- a deterministic script for sqlite3's shell against an
-- in-memory database, for the real-program tier: Debian's sqlite3 under WPP,
-- power-failed at random moments, must print exactly what an uninterrupted
-- run prints. The whole database lives in the process's memory, so the power
-- failures land in the B-tree code, the page cache, the sorter, the virtual
-- machine, FTS5 and JSON.
.mode list
.headers off

CREATE TABLE item(id INTEGER PRIMARY KEY, grp INTEGER, name TEXT, price REAL, doc TEXT);
WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 60000)
INSERT INTO item
SELECT i, i % 97, printf('item-%06d-%s', i, substr('abcdefghij', 1 + i % 7, 3)),
       (i * 37 % 1000) / 10.0,
       json_object('i', i, 'tags', json_array(i % 5, i % 11))
FROM n;
SELECT 'rows', count(*), sum(price) FROM item;

CREATE INDEX item_grp ON item(grp, price);
SELECT 'group', grp, count(*), round(avg(price), 3) FROM item
 WHERE grp IN (0, 13, 42, 96) GROUP BY grp ORDER BY grp;

UPDATE item SET price = price * 1.5 WHERE id % 13 = 0;
DELETE FROM item WHERE id % 17 = 0;
SELECT 'after update', count(*), round(sum(price), 2) FROM item;

SELECT 'rank', id, name, price FROM (
  SELECT id, name, price, rank() OVER (PARTITION BY grp ORDER BY price DESC, id) AS r
  FROM item WHERE grp < 3)
 WHERE r <= 2 ORDER BY id;

SELECT 'json', json_extract(doc, '$.tags[1]') AS t, count(*) FROM item
 GROUP BY t ORDER BY t LIMIT 5;

CREATE VIRTUAL TABLE note USING fts5(body);
WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 20000)
INSERT INTO note(rowid, body)
SELECT i, printf('note %d about %s and %s', i,
                 json_extract('["apple","banana","cherry","damson","elder","fig","grape"]',
                              printf('$[%d]', i % 7)),
                 json_extract('["red","green","blue","white","black"]', printf('$[%d]', i % 5)))
FROM n;
SELECT 'fts', count(*) FROM note WHERE note MATCH 'apple AND blue';
SELECT 'fts first', rowid FROM note WHERE note MATCH 'cherry NOT black' ORDER BY rowid LIMIT 3;

CREATE TABLE pair AS
SELECT a.id AS x, b.id AS y FROM item a JOIN item b ON b.grp = a.grp AND b.id > a.id
 WHERE a.id < 3000 AND b.id < 3000;
SELECT 'pairs', count(*), sum(x * y % 1009) FROM pair;

SELECT 'sorted', group_concat(name, ',') FROM (
  SELECT name FROM item ORDER BY substr(name, 13), id DESC LIMIT 8);
SELECT 'integrity', * FROM pragma_integrity_check;
